"""Shared helpers of every command: bounded reading, validated values, scrubbed output, YAML, versions."""
