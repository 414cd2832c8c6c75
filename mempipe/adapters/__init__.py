"""Ports and their implementations: store, embedding, llm."""
