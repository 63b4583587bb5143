"""Calculator tools using FunctionToolset."""
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import FunctionToolset

from llm_do.runtime import CallContext
from llm_do.toolsets.approval import set_toolset_approval_config


def build_calc_tools(_ctx: RunContext[CallContext]) -> FunctionToolset:
    calc_tools = FunctionToolset()

    @calc_tools.tool
    def factorial(n: int) -> int:
        """Calculate factorial of n."""
        result = 1
        for i in range(2, n + 1):
            result *= i
        return result

    @calc_tools.tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    set_toolset_approval_config(
        calc_tools,
        {"factorial": {"pre_approved": True}, "add": {"pre_approved": True}},
    )

    return calc_tools


TOOLSETS = {"calc_tools": build_calc_tools}
