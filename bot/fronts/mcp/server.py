"""The MCP server (the official SDK's `MCPServer`): the tools a coding agent calls to start,
follow and verify debates, and each debate as the resource `debate://ID`. Every debate is
submitted through the intake (`admission.submit_debate`); bad input is answered as a tool error
(`ToolError`: the SDK returns it as a result with `isError`, which the specification reserves
for errors the model can read and fix), naming the argument and the limit."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.subscriptions import ResourceUpdated
from pydantic import Field

from bot.fronts.mcp import stopping
from bot.fronts.mcp.admission import submit_debate
from bot.fronts.mcp.linking import MAX_LINK_CHARS, LinkRefusedError, read_link
from bot.fronts.mcp.paths import AllowedDirs, PathRefusedError
from bot.fronts.mcp.protocols import protocol_entry
from bot.fronts.mcp.reading import Reader, UnknownDebateError
from bot.fronts.mcp.watching import CountingBus, DebateWatch
from bot.hosts.clients import HostClients
from bot.intake.errors import NotAdmittedError
from bot.intake.intake import Intake
from bot.store.debate_tables import DebateSource
from engine.models import MAX_CONTEXT_CHARS, ContextDocument
from engine.protocols import DEFAULT_PROTOCOL, PROTOCOLS

log = logging.getLogger(__name__)

MAX_WAIT_S = 50
"""The longest `wait_for_debate` blocks: under the 60 seconds many clients allow a tool call."""
MAX_DOCUMENTS = 20
Progress = Callable[[int], Awaitable[None]]
"""Told the number of turns a debate has recorded, each time it grows."""


@dataclass
class McpFront:
    """What the tools work with: the intake, the store reader, the allowed directories, and
    `run` (run an admitted debate in this process; None leaves it to the workers), and the code
    hosts' clients that read a `link` (None: links are refused). `bus` carries `debate://ID`
    updates to clients listening (`subscriptions/listen`): when a debate run here finishes, and
    from `watch` when any debate's state or stored turns change, wherever it runs."""

    intake: Intake
    reader: Reader
    allowed: AllowedDirs
    requested_by: str
    run: Callable[[int], Coroutine[Any, Any, None]] | None = None
    hosts: HostClients | None = None
    poll_s: float = 0.2
    running: set[asyncio.Task[None]] = field(default_factory=set)
    bus: CountingBus = field(default_factory=CountingBus)

    def watch(self) -> DebateWatch:
        """What tells listeners of changes to debates run in other processes."""
        return DebateWatch(reader=self.reader, bus=self.bus)

    def start_running(self, debate_id: int) -> None:
        if self.run is None:
            return
        task = asyncio.get_running_loop().create_task(self._run(debate_id))
        # Held until done: the loop keeps only a weak reference to a task.
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _run(self, debate_id: int) -> None:
        assert self.run is not None
        try:
            await self.run(debate_id)
        except Exception:
            # The worker records a debate's own failures; this is one it could not record (the
            # store gone mid-run): nobody awaits this task, so it is logged here.
            log.exception("debate %d could not be run in this process", debate_id)
        finally:
            await self.bus.publish(ResourceUpdated(uri=f"debate://{debate_id}"))

    async def wait(
        self, debate_id: int, timeout_s: float, progress: Progress | None = None
    ) -> bool:
        """Whether debate `debate_id` finished within `timeout_s`; `progress` hears each new
        count of turns recorded (MCP progress notifications, for a client that asked)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        told = -1
        while True:
            finished, turns = await asyncio.to_thread(self.reader.progress, debate_id)
            if progress is not None and turns != told:
                told = turns
                await progress(turns)
            if finished:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(self.poll_s)


def _protocols_text() -> str:
    return "; ".join(
        f"{d.name} (rounds {d.default_rounds} by default, at most {d.max_rounds})"
        for d in PROTOCOLS.values()
    )


def _checked_args(protocol: str | None, rounds: int | None, budget_usd: float | None) -> None:
    """Refuse what the tool's arguments can already tell is wrong, named as the agent gave it."""
    if protocol is not None and protocol not in PROTOCOLS:
        raise ToolError(
            f"unknown protocol {protocol!r}; use one of: {', '.join(PROTOCOLS)}"
            " (list_protocols says what each is for)"
        )
    definition = PROTOCOLS[protocol or DEFAULT_PROTOCOL]
    if rounds is not None and not 1 <= rounds <= definition.max_rounds:
        raise ToolError(
            f"rounds={rounds} is out of range for the {definition.name} protocol: give 1 to"
            f" {definition.max_rounds}, or leave it out for {definition.default_rounds}"
        )
    if budget_usd is not None and budget_usd <= 0:
        raise ToolError(
            f"budget_usd={budget_usd} is out of range: give a positive amount in US dollars,"
            " or leave it out for the deployment's default"
        )


def _documents(
    front: McpFront, context: list[str], context_files: list[str]
) -> tuple[ContextDocument, ...]:
    if len(context) + len(context_files) > MAX_DOCUMENTS:
        raise ToolError(f"too many context documents: at most {MAX_DOCUMENTS} in all")
    documents: list[ContextDocument] = []
    for number, text in enumerate(context, start=1):
        if len(text) > MAX_CONTEXT_CHARS:
            raise ToolError(
                f"context[{number - 1}] is {len(text):,} characters, more than the"
                f" {MAX_CONTEXT_CHARS:,} a debate can read; pass the relevant part only"
            )
        if not text.strip():
            raise ToolError(f"context[{number - 1}] is empty")
        documents.append(ContextDocument(title=f"context {number}", text=text))
    for name in context_files:
        try:
            documents.append(front.allowed.read(name))
        except PathRefusedError as error:
            raise ToolError(str(error)) from None
    return tuple(documents)


async def _linked(front: McpFront, link: str | None) -> tuple[str | None, list[ContextDocument]]:
    """The link as stored with the debate and what it gave; ToolError saying why not."""
    if link is None:
        return None, []
    if front.hosts is None:
        raise ToolError("this server reads no links; pass the text as `context` instead")
    try:
        linked = await read_link(front.hosts, link)
    except LinkRefusedError as error:
        raise ToolError(str(error)) from None
    return linked.url, list(linked.documents)


def build_server(front: McpFront) -> MCPServer:
    """The MCP server over `front`; the caller picks the transport (stdio, Streamable HTTP)."""
    server = MCPServer(
        name="debatebot",
        subscriptions=front.bus,
        instructions=(
            "Ask debatebot to debate a contested decision (an ADR, a design, a pull request):"
            " start_debate answers at once with an id; then call wait_for_debate with it, again"
            " while it answers `finished: false` (this server creates no MCP tasks), or"
            " get_debate; cancel_debate stops one. An escalated verdict means people decide:"
            " `review` in the answer says who and, once they have, what they decided."
        ),
    )

    @server.tool(
        description=(
            "Start a structured multi-agent debate on a decision and return its id at once"
            " (the debate runs in the background). Give the decision as `question`; evidence as"
            " `context` (texts), `context_files` (paths under the directories this server"
            " allows) or `link` (a GitHub or GitLab file or pull/merge request). The answer is"
            " not an MCP task: call wait_for_debate with the id, again while it answers"
            " `finished: false`."
            f" Protocols: {_protocols_text()}."
        )
    )
    async def start_debate(
        question: Annotated[str, Field(description="the decision to debate, e.g. 'Adopt ADR-7?'")],
        context: Annotated[
            list[str] | None,
            Field(
                description=(
                    f"documents the debate may cite, as text (each at most {MAX_CONTEXT_CHARS:,}"
                    " characters)"
                )
            ),
        ] = None,
        context_files: Annotated[
            list[str] | None,
            Field(description="paths of documents under the allowed directories (stdio only)"),
        ] = None,
        link: Annotated[
            str | None,
            Field(
                max_length=MAX_LINK_CHARS,
                description=(
                    "a GitHub or GitLab link to a file (e.g. an ADR) or a pull/merge request,"
                    " whose ADR files and description the debate reads"
                ),
            ),
        ] = None,
        protocol: Annotated[
            str | None,
            Field(description=f"one of {', '.join(PROTOCOLS)}; default {DEFAULT_PROTOCOL}"),
        ] = None,
        rounds: Annotated[
            int | None, Field(description="rounds to run (the protocol's default when left out)")
        ] = None,
        budget_usd: Annotated[
            float | None, Field(description="the most this debate may spend, in US dollars")
        ] = None,
        stances_for: Annotated[
            list[str] | None,
            Field(
                description="stances protocol: one debater per stance arguing for (what its"
                " errors call --for)"
            ),
        ] = None,
        stances_against: Annotated[
            list[str] | None,
            Field(
                description="stances protocol: one debater per stance arguing against (--against)"
            ),
        ] = None,
    ) -> dict[str, Any]:
        if not question.strip():
            raise ToolError("`question` is empty: give the decision to debate, e.g. 'Adopt ADR-7?'")
        _checked_args(protocol, rounds, budget_usd)
        documents = await asyncio.to_thread(_documents, front, context or [], context_files or [])
        url, linked = await _linked(front, link)
        if len(documents) + len(linked) > MAX_DOCUMENTS:
            raise ToolError(f"too many context documents: at most {MAX_DOCUMENTS} in all")
        try:
            debate_id = await submit_debate(
                front.intake,
                question=question,
                context=(*linked, *documents),
                protocol=protocol,
                rounds=rounds,
                budget_usd=budget_usd,
                stances=(tuple(stances_for or ()), tuple(stances_against or ())),
                requested_by=front.requested_by,
                link=url,
            )
        except NotAdmittedError as error:
            raise ToolError(str(error)) from None
        front.start_running(debate_id)
        return {
            "id": debate_id,
            "state": "queued",
            "resource": f"debate://{debate_id}",
            "next": f"call wait_for_debate with id {debate_id}",
        }

    @server.tool(
        description=(
            "A debate's state and turns so far; once finished, its verdict (decision, synthesis,"
            " confidence with its components, flags, cost) and how to verify its record. When"
            " the verdict is escalated, `review` says people are deciding and where (do not act"
            " on the verdict alone; ask again later), then who decided what."
        )
    )
    async def get_debate(
        id: Annotated[int, Field(description="the debate's id")],
    ) -> dict[str, Any]:
        return await _read(front, id)

    @server.tool(
        description=(
            "Wait until a debate finishes or `timeout_s` passes (at most"
            f" {MAX_WAIT_S} seconds), then answer as get_debate does plus `finished`. If"
            " `finished` is false, call it again: this is how every client follows a debate"
            " (the server creates no MCP tasks). With a progress token, each recorded turn is"
            " reported as progress."
        )
    )
    async def wait_for_debate(
        id: Annotated[int, Field(description="the debate's id")],
        timeout_s: Annotated[
            float, Field(gt=0, le=MAX_WAIT_S, description=f"seconds to wait, at most {MAX_WAIT_S}")
        ] = 30,
        ctx: Context | None = None,
    ) -> dict[str, Any]:
        async def progress(turns: int) -> None:
            # Sent only when the call carried a progress token (the SDK drops it otherwise).
            if ctx is not None:
                await ctx.report_progress(turns, message=f"{turns} turns recorded")

        try:
            finished = await front.wait(id, timeout_s, progress)
        except UnknownDebateError as error:
            raise ToolError(str(error)) from None
        answer = await _read(front, id)
        answer["finished"] = finished
        return answer

    @server.tool(
        description=(
            "Stop a debate: it ends as cancelled before its next model call (asking again"
            " changes nothing). Refused for a debate that has already finished."
        )
    )
    async def cancel_debate(
        id: Annotated[int, Field(description="the debate's id")],
    ) -> dict[str, Any]:
        try:
            return await stopping.cancel_debate(
                front.reader.engine,
                workspace=front.reader.workspace,
                debate_id=id,
                by=front.requested_by,
            )
        except stopping.CancelError as error:
            raise ToolError(str(error)) from None

    @server.tool(description="The newest debates (id, state, source, question, decision, cost).")
    async def list_debates(
        limit: Annotated[int, Field(ge=1, le=100, description="how many, 1 to 100")] = 20,
        only_mcp: Annotated[bool, Field(description="only debates started over MCP")] = False,
    ) -> list[dict[str, Any]]:
        return await asyncio.to_thread(
            front.reader.recent, limit=limit, source=DebateSource.MCP if only_mcp else None
        )

    @server.tool(
        description=(
            "The debate protocols: what each is for, its default and most rounds, the model"
            " calls a debate typically makes, the models this server runs its debaters and its"
            " deciding role on, and what a debate of it typically costs here (the median of its"
            " last finished debates; null until one has finished)."
        )
    )
    async def list_protocols() -> list[dict[str, Any]]:
        models = front.intake.policy.models()
        costs = await asyncio.to_thread(front.reader.typical_costs, list(PROTOCOLS))
        return [protocol_entry(d, models, costs.get(d.name)) for d in PROTOCOLS.values()]

    @server.tool(
        description=(
            "Audit-check a debate's record: give `id` for a stored debate, or `export` for the"
            " JSON a `debatebot export` wrote. `ok` true means the turn chain, verdict and seal"
            " are intact; otherwise `kind` and `problem` say what was changed."
        )
    )
    async def verify_record(
        id: Annotated[int | None, Field(description="a stored debate's id")] = None,
        export: Annotated[
            dict[str, Any] | None, Field(description="an exported record (JSON object)")
        ] = None,
    ) -> dict[str, Any]:
        if (id is None) == (export is None):
            raise ToolError("give exactly one of `id` (a stored debate) or `export` (a record)")
        try:
            if id is not None:
                return await asyncio.to_thread(front.reader.verify_stored, id)
            assert export is not None
            return await asyncio.to_thread(front.reader.verify_upload, export)
        except (UnknownDebateError, ValueError) as error:
            raise ToolError(str(error)) from None

    @server.resource(
        "debate://{debate_id}",
        name="debate",
        description=(
            "A debate as get_debate answers it; listen to it (subscriptions/listen) to hear when"
            " a debate this server runs finishes"
        ),
        mime_type="application/json",
    )
    async def debate_resource(debate_id: str) -> str:
        try:
            return json.dumps(await asyncio.to_thread(front.reader.debate, int(debate_id)))
        except (UnknownDebateError, ValueError) as error:
            raise ResourceNotFoundError(f"debate://{debate_id}: {error}") from None

    return server


async def _read(front: McpFront, debate_id: int) -> dict[str, Any]:
    try:
        return await asyncio.to_thread(front.reader.debate, debate_id)
    except UnknownDebateError as error:
        raise ToolError(str(error)) from None
