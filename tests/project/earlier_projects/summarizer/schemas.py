from pydantic import BaseModel, Field


class SummarizerInput(BaseModel):
    """Input schema for summarizer ranges."""

    path: str = Field(..., description="Path to the file")
    start: int = Field(0, ge=0, description="Inclusive start offset (characters)")
    end: int = Field(1000, gt=0, description="Exclusive end offset (characters)")
