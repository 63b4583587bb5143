"""A real model in the suite: recorded HTTP between llm-do and llama.cpp's `llama-server`, served again on loopback.

`httplog` reads the recorded traffic (`*.http.log`, byte for byte as it crossed the wire), `toolcalls` the
recorded tool calls of a model held to a JSON schema (`tool-calls.jsonl`, one request and its response a line);
`server` is an OpenAI-compatible HTTP server on 127.0.0.1 that answers each request with the recorded response to
the same conversation, so that `openai-chat:` runs go through pydantic-ai's real OpenAI client, real HTTP and real
SSE framing, offline and deterministically.
"""
