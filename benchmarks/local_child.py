"""What running the local model in a child process costs per call, against running it in this
process, in one run.

The child process (`engine.providers.llama_process`) keeps a native crash in llama.cpp from
taking the worker or the CLI down; each call then crosses two pipes as JSON frames and a thread
hop. Measured on the same requests, interleaved so both sides meet the same machine load:
- a one-token call without a schema (nearly all of it is the hop itself);
- the first turns of a real debate (framing, proposer, critic; `benchmarks.local_speed` captures
  them) with their schema grammar, at `--max-tokens`;
- the start: spawning the child, loading the model there and its first token, against loading
  it here and the same first token.

Goal: child ÷ in-process ≤ 1.05 on a debate turn (the hop is lost in generation time).

    .venv/bin/python -m benchmarks.local_child [--max-tokens 128] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from benchmarks.local_speed import debate_requests

GOAL = 1.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tiny-calls", type=int, default=20)
    args = parser.parse_args()
    from engine.providers.local import smollm2_path

    requests = [
        r.model_copy(update={"max_tokens": args.max_tokens, "model": smollm2_path().name})
        for r in debate_requests()
    ]
    asyncio.run(measure(requests, args.max_tokens, args.rounds, args.tiny_calls))


async def measure(requests: list[Any], max_tokens: int, rounds: int, tiny_calls: int) -> None:
    from engine.providers.local import LlamaSession, LocalLlamaLLM

    tiny = requests[0].model_copy(update={"max_tokens": 1, "output_schema": None})
    here = LlamaSession()
    started = time.perf_counter()
    here.load()
    here.generate(tiny)
    load_here = time.perf_counter() - started
    child = LocalLlamaLLM()
    try:
        started = time.perf_counter()
        await child.complete(tiny)
        load_child = time.perf_counter() - started

        async def in_child(request: Any) -> float:
            began = time.perf_counter()
            await child.complete(request)
            return time.perf_counter() - began

        def in_process(request: Any) -> float:
            began = time.perf_counter()
            here.generate(request)
            return time.perf_counter() - began

        tiny_here, tiny_child = [], []
        for _ in range(tiny_calls):
            tiny_here.append(in_process(tiny))
            tiny_child.append(await in_child(tiny))
        turn_here, turn_child = [], []
        for _ in range(rounds):
            for request in requests:
                turn_here.append(in_process(request))
                turn_child.append(await in_child(request))
    finally:
        await child.aclose()

    def ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    hop = ms(tiny_child) - ms(tiny_here)
    ratio = sum(turn_child) / sum(turn_here)
    print(f"{len(requests)} debate turns x {rounds} rounds at up to {max_tokens} tokens;")
    print(f"{tiny_calls} one-token calls; {here.config.n_threads} threads")
    print(
        f"one-token call, median: in-process {ms(tiny_here):7.1f} ms,"
        f" child {ms(tiny_child):7.1f} ms"
    )
    print(f"  the hop: {hop:+.1f} ms a call ({ms(tiny_child) / ms(tiny_here):.2f}x)")
    print(
        f"debate turn, median: in-process {ms(turn_here):7.0f} ms, child {ms(turn_child):7.0f} ms"
    )
    print(
        f"start (load the model, then one token): in-process {load_here:.2f} s, child (spawn,"
        f" load, one token) {load_child:.2f} s"
    )
    print(f"child ÷ in-process on debate turns (total): goal ≤ {GOAL}, measured {ratio:.3f}")


if __name__ == "__main__":
    main()
