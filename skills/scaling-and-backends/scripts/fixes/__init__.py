"""Upstream fixes by release: the recorded index (``index.json.gz``, built by ``tools/fix_index.py``) and its search."""
