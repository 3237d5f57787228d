"""The lookup: from an error message or symptom words to the troubleshooting entry that answers it."""
