"""Extractors that turn pinned upstream releases into the committed facts file.

Every extractor reads Python source as text and AST from inside a wheel or sdist; nothing is imported or executed.
``tools/refresh_upstream_facts.py`` is the command that drives them.
"""
