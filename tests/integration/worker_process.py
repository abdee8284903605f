"""A worker process for the crash tests: the real DebateWorker on a slow scripted model.

    python -m tests.integration.worker_process DB_URL WORKER_ID LOG DELAY_S [MODERATOR_S [SLOW]]

Each model call appends the digest of its request to LOG before answering, so a test can
tell which turns a worker asked a model for. MODERATOR_S, when given, is how much longer the
moderator takes than the other roles (a thinking model's moderation); SLOW names the output
schema that takes that long instead (the structured protocol's `Ruling`). Adversarial turns are
answered by the canned debate, structured ones by the structured protocol's test script.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from bot.jobs.worker import DebateWorker, WorkerConfig
from bot.store.db import make_engine
from engine.ledger import request_digest
from engine.llm import LLMRequest
from engine.models import ModelSettings
from engine.providers.fake import FunctionLLM
from tests.helpers import SCHEMA_BY_ROLE, DebateScript, reply_for, shipped_prompts
from tests.unit import test_structured


def main() -> None:
    url, worker_id, call_log, delay = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
    moderator_s = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    slow = sys.argv[6] if len(sys.argv) > 6 else SCHEMA_BY_ROLE["moderator"]
    adversarial = DebateScript(moderator=[reply_for("moderator", recommend_another_round=True)])
    structured = test_structured.Script()

    def script(request: LLMRequest) -> Any:
        if request.schema_name in adversarial.role_of_schema:
            return adversarial(request)
        return structured(request)

    async def slowly(request: LLMRequest) -> Any:
        await asyncio.sleep(moderator_s)
        return script(request)

    def logged(request: LLMRequest) -> Any:
        settings = ModelSettings(
            provider="fake",
            model=request.model,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
        )
        with call_log.open("a", encoding="utf-8") as log:
            log.write(request_digest(request.messages, settings) + "\n")
        if request.schema_name == slow and moderator_s:
            return slowly(request)
        return script(request)

    llm = FunctionLLM(logged, delay_s=float(delay))
    engine = make_engine(url)
    worker = DebateWorker(
        engine=engine,
        resolve_llm=lambda _s: llm,
        prompts=shipped_prompts(),
        worker_id=worker_id,
        config=WorkerConfig(lease_s=2.0, heartbeat_s=0.5),
    )

    async def claim_within_a_minute() -> None:
        # A debate held by a dead worker becomes claimable only once its lease expires.
        for _ in range(600):
            if await worker.run_once():
                return
            await asyncio.sleep(0.1)
        raise SystemExit("no debate became claimable within a minute")

    asyncio.run(claim_within_a_minute())
    engine.dispose()


if __name__ == "__main__":
    main()
