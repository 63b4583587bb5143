"""Run the bank service in process, offline, against the database in `LLM_DO_DATABASE_URL`.

    LLM_DO_DATABASE_URL=postgresql://user@localhost/bank python examples/service/demo.py

It opens two accounts, then sends three transfers through the app (its lifespan runs, as under
uvicorn): one the teller commits, one it forgets to commit (rolled back), and one to an account
that does not exist (a JSON error with the run's audit).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bank.app import create_app

from llm_do.testing import asgi_client

TRANSFERS: list[dict[str, Any]] = [
    {"reference": "pay-1", "source": "A", "target": "B", "amount": 10},
    {"reference": "pay-2", "source": "A", "target": "B", "amount": 5, "forget_commit": True},
    {"reference": "pay-3", "source": "A", "target": "Z", "amount": 1},
]


async def main() -> None:
    async with asgi_client(create_app()) as client:
        for name, balance in (("A", 100), ("B", 50)):
            opened = await client.post("/accounts", json={"name": name, "balance": balance})
            opened.raise_for_status()
        print("balances before:", (await client.get("/accounts")).json())
        for transfer in TRANSFERS:
            response = await client.post("/transfer", json=transfer)
            body = response.json()
            print(f"{transfer['reference']}: {response.status_code} {body.get('output') or body.get('error')}")
            for line in body["audit"]:
                print(f"  audit: {line}")
        print("balances after: ", (await client.get("/accounts")).json())


if __name__ == "__main__":
    asyncio.run(main())
