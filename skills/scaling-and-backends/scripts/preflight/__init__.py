"""The vLLM server pre-flight behind check_vllm_server.py: fetch (GET only), judge, report."""
