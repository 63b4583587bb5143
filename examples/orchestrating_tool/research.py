"""A tool that runs three workers (none of which `main` lists), the searches in parallel."""

from __future__ import annotations

import asyncio
import json

from pydantic_ai import RunContext

from llm_do import CallScope, ToolPolicy, Toolset, tool


class Research(Toolset):
    # Its only effect is running agents, whose own tools are gated by their policies: declared safe, it runs without
    # asking, as a call to an agent does (a tool that declares nothing asks).
    default_policy = ToolPolicy()

    @tool
    async def deep_research(self, ctx: RunContext[CallScope], question: str) -> str:
        """Research a question: expand it into queries, search each, and synthesize the findings."""
        scope = ctx.deps
        expanded = await scope.call_agent("query_expander", question)
        try:
            queries = [str(query) for query in json.loads(expanded)]
        except (ValueError, TypeError):
            queries = [question]  # the expander did not answer with a list: search the question itself
        findings = await asyncio.gather(*(scope.call_agent("searcher", query) for query in queries))
        notes = "\n".join(f"- {query}: {finding}" for query, finding in zip(queries, findings, strict=True))
        return str(await scope.call_agent("synthesizer", f"Question: {question}\nFindings:\n{notes}"))
