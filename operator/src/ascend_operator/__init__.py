"""Ascend inference operator: serves LLMs with vLLM on Ascend 910B nodes, judged by real generation."""
