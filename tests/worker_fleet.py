"""`debatebot worker` processes that a test starts, SIGKILLs and starts again, each configured
from a `Settings` (the same values the test's own bot runs with) and logging to a file of its own
(a pipe nobody reads would fill and stall a long-running worker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from types import TracebackType

from pydantic import SecretStr

from bot.settings import Settings

DEBATEBOT = str(Path(sys.executable).with_name("debatebot"))


class WorkerFleet:
    """Worker processes in named slots. `start(slot)` starts one under a new worker name
    (`<slot>.<n>`: a restarted worker is another worker, as a restarted container has another
    host name), `kill(slot)` SIGKILLs it, `stop()` SIGTERMs every live one and checks each
    handed back its debates and exited 0. Leaving the `with` block kills whatever still runs."""

    def __init__(
        self,
        settings: Settings,
        logs: Path,
        *,
        concurrency: int = 1,
        env_for: Callable[[str], dict[str, str]] = lambda _name: {},
    ) -> None:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("DEBATEBOT_")}
        self.env = inherited | self.environment(settings)
        self.env_for = env_for
        """More variables for the worker of a name (an address of its own, say)."""
        self.logs = logs
        self.concurrency = concurrency
        self.live: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
        self.started: list[str] = []
        """Every worker name started, in order."""
        self.killed: dict[str, float] = {}
        """Each SIGKILLed worker's name and when it was killed (`time.monotonic`)."""

    @staticmethod
    def environment(settings: Settings) -> dict[str, str]:
        """The `DEBATEBOT_*` variables that give a process the values set on `settings`."""
        env: dict[str, str] = {}
        for name in settings.model_fields_set:
            value = getattr(settings, name)
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, list | dict | set | tuple):
                value = json.dumps(sorted(value) if isinstance(value, set) else value)
            env[f"DEBATEBOT_{name.upper()}"] = str(value)
        return env

    def start(self, slot: str) -> str:
        """Start a worker in `slot` (empty); its worker name."""
        assert slot not in self.live, f"{slot} is running"
        name = f"{slot}.{sum(n.startswith(f'{slot}.') for n in self.started) + 1}"
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [DEBATEBOT, "worker", "--name", name, "--concurrency", str(self.concurrency)],
                env=self.env | self.env_for(name),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.live[slot] = (name, process)
        self.started.append(name)
        return name

    def name_of(self, slot: str) -> str:
        return self.live[slot][0]

    def kill(self, slot: str) -> None:
        """SIGKILL the worker in `slot`: no shutdown, no lease handed back."""
        name, process = self.live.pop(slot)
        assert process.poll() is None, f"{name} had already exited:\n{self.log(name)}"
        process.send_signal(signal.SIGKILL)
        self.killed[name] = time.monotonic()
        assert process.wait(timeout=30) == -signal.SIGKILL

    def stop(self) -> None:
        """SIGTERM every live worker once it is up (before, SIGTERM's default would end it);
        each must exit 0 (it handed back what it held)."""
        live, self.live = self.live, {}
        for name, process in live.values():
            deadline = time.monotonic() + 120
            while not self.up(name) and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            process.send_signal(signal.SIGTERM)
        for name, process in live.values():
            code = process.wait(timeout=60)
            assert code == 0, f"{name} exited {code}:\n{self.log(name)}"

    def up(self, name: str) -> bool:
        """Whether the worker `name` is up: it said so, after setting its signal handlers."""
        return f"worker {name}: up to" in self.log(name)

    def log(self, name: str) -> str:
        """What the worker `name` wrote (its stderr and stdout)."""
        return (self.logs / f"{name}.log").read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> WorkerFleet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for _, process in self.live.values():
            process.kill()
            process.wait(timeout=30)
        self.live.clear()
