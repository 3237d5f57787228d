"""The environment diagnostic behind check_optional_backends.py: gather facts, judge backends, render."""
