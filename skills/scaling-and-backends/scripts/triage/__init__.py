"""Log triage: from a failed run's logs to the first failure, its echoes and the troubleshooting entry."""
