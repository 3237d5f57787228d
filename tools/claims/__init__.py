"""The claim checker for the skill Markdown, by job; ``tools/skill_claims.py`` is its command."""
