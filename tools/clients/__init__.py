"""The client check's parts (``tools/check_clients.py`` is the command): pins, sandbox, model stand-in, routes."""
