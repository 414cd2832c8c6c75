"""The extractor port and its implementations: an offline rule-based extractor (the embedded
default) and an LLM extractor over any OpenAI-compatible endpoint."""
