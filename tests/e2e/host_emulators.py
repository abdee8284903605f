"""Loopback GitHub REST (v3) and GitLab REST (v4) APIs: repository files at a ref, pull and merge
request files, issue comments and merge request notes (lists paged by `per_page` and `page`),
with the failures the hosts answer (404 for a private repository, 403 or 429 with rate-limit
headers, 5xx), and hostile answers a host that is compromised or misconfigured could give: a
redirect to another host, a body dripped a byte at a time, a body far larger than any real
answer, and one cut short of the length it claims.

Each serves its web links too (`/{owner}/{repo}/blob/…`, `/-/merge_requests/…`) only as
addresses: the bot parses them and calls the API, as against the real hosts. `OtherHost` is the
second loopback server hostile answers point at; it records every credential that reaches it.
Both hosts count the TCP connections they accept.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from aiohttp import web


@dataclass
class HostFault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "error"})
    hang_s: float = 0.0
    """Wait this long before answering (a host that hangs past the client's timeout)."""
    redirect: str = ""
    """Answer `status` (a 3xx) with `Location` at this address plus the request's path."""
    drip_s: float = 0.0
    """Send the body one byte every `drip_s` (a host that answers, but never finishes)."""
    size: int = 0
    """Send a body of this many bytes, in chunks, with no Content-Length (an answer far larger
    than any real one)."""
    claim: int = 0
    """Claim this Content-Length, send the body (shorter), and close the connection."""


def redirect(to: str, status: int = 302) -> HostFault:
    """A redirect of the next request to the same path on another host."""
    return HostFault(status, redirect=to, body={"message": "Moved"})


@dataclass
class OtherHost:
    """The host a hostile answer points at: answers every request with `body` and records the
    request's method, path and any credential it carried (Authorization, PRIVATE-TOKEN,
    Cookie), and the body it brought (`bodies`: a 307 or 308 sends the body again)."""

    body: bytes = b'{"message": "planted"}'
    content_type: str = "application/json"
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None

    CREDENTIALS = ("authorization", "private-token", "cookie")

    def credentials(self) -> list[dict[str, str]]:
        """The credential headers each request came with (empty dicts are left out)."""
        return [creds for _, _, creds in self.requests if creds]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._any)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _any(self, request: web.Request) -> web.Response:
        creds = {k.lower(): v for k, v in request.headers.items() if k.lower() in self.CREDENTIALS}
        self.requests.append((request.method, request.path_qs, creds))
        self.bodies.append(await request.read())
        return web.Response(body=self.body, content_type=self.content_type)


def rate_limited_github(reset_in_s: float = 1.0) -> HostFault:
    reset = str(int(time.time() + reset_in_s))
    return HostFault(
        403,
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
        {"message": "API rate limit exceeded"},
    )


def rate_limited_gitlab(retry_after_s: int = 1) -> HostFault:
    return HostFault(429, {"Retry-After": str(retry_after_s)}, {"message": "429 Too Many Requests"})


@dataclass
class PullRequest:
    number: int
    title: str
    body: str
    head: str
    files: dict[str, str]
    """path -> status (added, modified, removed)"""


@dataclass
class HostEmulator(ABC):
    """What both hosts share: files per (repo, ref), pull requests, comments, faults."""

    token: str = "host-token-12345678"
    files: dict[tuple[str, str, str], bytes] = field(default_factory=dict)
    pulls: dict[tuple[str, int], PullRequest] = field(default_factory=dict)
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    private: set[str] = field(default_factory=set)
    faults: list[HostFault] = field(default_factory=list)
    outages: dict[str, int] = field(default_factory=dict)
    """Path fragment -> the status every request holding it gets until restored (503: a comments
    API down for a while; 404: a repository the token lost access to)."""
    requests: list[str] = field(default_factory=list)
    streamed: int = 0
    """Bytes of the last oversized body (`HostFault.size`) the client took before it stopped."""
    connections: int = 0
    """TCP connections accepted."""
    url: str = ""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1001))
    _runner: web.AppRunner | None = None

    def add_file(self, repo: str, ref: str, path: str, text: str | bytes) -> None:
        self.files[(repo, ref, path)] = text.encode() if isinstance(text, str) else text

    def add_pull(
        self, repo: str, number: int, *, title: str, body: str, head: str, files: dict[str, str]
    ) -> None:
        self.pulls[(repo, number)] = PullRequest(number, title, body, head, files)

    def fail(self, *faults: HostFault) -> None:
        """Answer the next API requests with these faults, in order."""
        self.faults.extend(faults)

    def down(self, fragment: str, status: int = 503) -> None:
        """Answer `status` to every request whose path holds `fragment`, until `restore()`."""
        self.outages[fragment] = status

    def restore(self) -> None:
        self.outages.clear()

    async def start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        accepted = server.connection_made

        def counted(handler: Any, transport: Any) -> None:
            self.connections += 1
            accepted(handler, transport)

        server.connection_made = counted  # type: ignore[method-assign]
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @abstractmethod
    def routes(self, app: web.Application) -> None:
        """Add the host's API routes."""

    async def _gate(
        self, request: web.Request, repo: str, authorized: bool
    ) -> web.StreamResponse | None:
        self.requests.append(f"{request.method} {request.path_qs}")
        for fragment, status in self.outages.items():
            if fragment in request.path:
                return web.json_response({"message": "unavailable"}, status=status)
        if self.faults:
            fault = self.faults.pop(0)
            if fault.hang_s:
                await asyncio.sleep(fault.hang_s)
            if fault.redirect or fault.drip_s or fault.size or fault.claim:
                return await self._hostile(request, fault)
            return web.json_response(fault.body, status=fault.status, headers=fault.headers)
        if repo in self.private and not authorized:
            return web.json_response({"message": "Not Found"}, status=404)
        return None

    async def _hostile(self, request: web.Request, fault: HostFault) -> web.StreamResponse:
        """A redirect, a drip, an oversized or a cut-short body, as `fault` says."""
        if fault.redirect:
            location = fault.redirect + request.path_qs
            return web.json_response(
                fault.body, status=fault.status, headers={"Location": location}
            )
        body = json.dumps(fault.body).encode()
        response = web.StreamResponse(status=fault.status, headers=fault.headers)
        response.content_type = "application/json"
        if fault.claim:
            response.content_length = fault.claim
            response.force_close()
        await response.prepare(request)
        try:
            if fault.drip_s:
                for byte in itertools.cycle(body):
                    await response.write(bytes([byte]))
                    await asyncio.sleep(fault.drip_s)
            elif fault.size:
                chunk = b" " * 65_536
                sent = 0
                while sent < fault.size:
                    await response.write(chunk)
                    sent += len(chunk)
                    self.streamed = sent
            else:
                await response.write(body)
        except ConnectionError:
            return response  # the client stopped reading: what a real server sees too
        if fault.claim:
            # Fewer bytes than claimed, then the connection closes: the client must not take the
            # short body for the whole.
            request.transport.close()  # type: ignore[union-attr]
            return response
        await response.write_eof()
        return response

    def _file(self, repo: str, ref: str, path: str) -> bytes | None:
        return self.files.get((repo, ref, path))

    @staticmethod
    def _page(request: web.Request, items: list[Any], default: int) -> list[Any]:
        """One page of `items`, as the hosts page their lists (`per_page`, `page`)."""
        per_page = int(request.query.get("per_page", str(default)))
        page = int(request.query.get("page", "1"))
        return items[(page - 1) * per_page : page * per_page]

    def _comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        comment = {"id": next(self._ids), "body": body}
        self.comments.setdefault((repo, number), []).append(comment)
        return comment


class GitHubEmulator(HostEmulator):
    def routes(self, app: web.Application) -> None:
        base = "/api/v3/repos/{owner}/{repo}"
        app.router.add_get(base + "/contents/{path:.+}", self._contents)
        app.router.add_get(base + "/pulls/{number}", self._pull)
        app.router.add_get(base + "/pulls/{number}/files", self._pull_files)
        app.router.add_get(base + "/issues/{number}", self._issue)
        app.router.add_get(base + "/issues/{number}/comments", self._comments)
        app.router.add_post(base + "/issues/{number}/comments", self._create_comment)
        app.router.add_patch(base + "/issues/comments/{id}", self._edit_comment)

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization", "") == f"token {self.token}" or (
            request.headers.get("Authorization", "") == f"Bearer {self.token}"
        )

    def _repo(self, request: web.Request) -> str:
        return f"{request.match_info['owner']}/{request.match_info['repo']}"

    async def _contents(self, request: web.Request) -> web.StreamResponse:
        repo = self._repo(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        path, ref = request.match_info["path"], request.query.get("ref", "main")
        content = self._file(repo, ref, path)
        if content is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(
            {
                "type": "file",
                "encoding": "base64",
                "size": len(content),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "sha": f"blob-{len(content)}",
                "content": base64.b64encode(content).decode(),
                "url": f"{self.url}{request.path}",
            }
        )

    def _pull_or_404(self, request: web.Request) -> tuple[str, PullRequest | None]:
        repo = self._repo(request)
        return repo, self.pulls.get((repo, int(request.match_info["number"])))

    async def _pull(self, request: web.Request) -> web.StreamResponse:
        repo, pull = self._pull_or_404(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        if pull is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(
            {
                "number": pull.number,
                "title": pull.title,
                "body": pull.body,
                "head": {"sha": pull.head, "ref": "adr-branch"},
                "url": f"{self.url}{request.path}",
            }
        )

    async def _pull_files(self, request: web.Request) -> web.StreamResponse:
        repo, pull = self._pull_or_404(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        if pull is None:
            return web.json_response({"message": "Not Found"}, status=404)
        files = [{"filename": path, "status": status} for path, status in pull.files.items()]
        return web.json_response(self._page(request, files, 30))

    async def _issue(self, request: web.Request) -> web.StreamResponse:
        repo = self._repo(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        number = int(request.match_info["number"])
        return web.json_response(
            {"number": number, "url": f"{self.url}/api/v3/repos/{repo}/issues/{number}"}
        )

    async def _comments(self, request: web.Request) -> web.StreamResponse:
        repo = self._repo(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        number = int(request.match_info["number"])
        comments = [
            {**c, "url": f"{self.url}/api/v3/repos/{repo}/issues/comments/{c['id']}"}
            for c in self.comments.get((repo, number), [])
        ]
        return web.json_response(self._page(request, comments, 30))

    async def _create_comment(self, request: web.Request) -> web.StreamResponse:
        repo = self._repo(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        body = (await request.json())["body"]
        comment = self._comment(repo, int(request.match_info["number"]), body)
        return web.json_response(
            {**comment, "url": f"{self.url}/api/v3/repos/{repo}/issues/comments/{comment['id']}"},
            status=201,
        )

    async def _edit_comment(self, request: web.Request) -> web.StreamResponse:
        repo = self._repo(request)
        refused = await self._gate(request, repo, self._authorized(request))
        if refused is not None:
            return refused
        comment_id = int(request.match_info["id"])
        for comments in self.comments.values():
            for comment in comments:
                if comment["id"] == comment_id:
                    comment["body"] = (await request.json())["body"]
                    return web.json_response(comment)
        return web.json_response({"message": "Not Found"}, status=404)


class GitLabEmulator(HostEmulator):
    legacy: bool = False
    """A GitLab before 15.7: no `/diffs` (404), only the deprecated `/changes`."""

    def routes(self, app: web.Application) -> None:
        base = "/api/v4/projects/{project}"
        app.router.add_get(base + "/repository/files/{path}", self._file_at)
        app.router.add_get(base + "/merge_requests/{iid}", self._merge_request)
        app.router.add_get(base + "/merge_requests/{iid}/changes", self._changes)
        app.router.add_get(base + "/merge_requests/{iid}/diffs", self._diffs)
        app.router.add_get(base + "/merge_requests/{iid}/notes", self._notes)
        app.router.add_post(base + "/merge_requests/{iid}/notes", self._create_note)
        app.router.add_put(base + "/merge_requests/{iid}/notes/{id}", self._edit_note)

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("PRIVATE-TOKEN", "") == self.token

    def _repo(self, request: web.Request) -> str:
        return unquote(request.match_info["project"])

    async def _gated(self, request: web.Request) -> tuple[str, web.StreamResponse | None]:
        repo = self._repo(request)
        return repo, await self._gate(request, repo, self._authorized(request))

    async def _file_at(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        path, ref = unquote(request.match_info["path"]), request.query.get("ref", "main")
        content = self._file(repo, ref, path)
        if content is None:
            return web.json_response({"message": "404 File Not Found"}, status=404)
        return web.json_response(
            {
                "file_name": path.rsplit("/", 1)[-1],
                "file_path": path,
                "size": len(content),
                "encoding": "base64",
                "content": base64.b64encode(content).decode(),
                "ref": ref,
                "blob_id": "b",
                "commit_id": ref,
                "last_commit_id": ref,
            }
        )

    def _mr(self, request: web.Request, repo: str) -> PullRequest | None:
        return self.pulls.get((repo, int(request.match_info["iid"])))

    async def _merge_request(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        mr = self._mr(request, repo)
        if mr is None:
            return web.json_response({"message": "404 Not found"}, status=404)
        return web.json_response(
            {
                "id": mr.number,
                "iid": mr.number,
                "title": mr.title,
                "description": mr.body,
                "sha": mr.head,
                "project_id": 1,
            }
        )

    async def _changes(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        mr = self._mr(request, repo)
        if mr is None:
            return web.json_response({"message": "404 Not found"}, status=404)
        changes = [
            {"new_path": path, "old_path": path, "deleted_file": status == "removed"}
            for path, status in mr.files.items()
        ]
        return web.json_response({"iid": mr.number, "changes": changes})

    async def _diffs(self, request: web.Request) -> web.StreamResponse:
        """One page of the changed files, with GitLab's pagination headers (`Link`, next)."""
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        mr = self._mr(request, repo)
        if mr is None or self.legacy:
            return web.json_response({"message": "404 Not found"}, status=404)
        per_page = int(request.query.get("per_page", "20"))
        page = int(request.query.get("page", "1"))
        files = [
            {"new_path": path, "old_path": path, "deleted_file": status == "removed", "diff": ""}
            for path, status in mr.files.items()
        ]
        headers = {"X-Page": str(page), "X-Total": str(len(files))}
        if page * per_page < len(files):
            following = request.url.update_query(page=str(page + 1), per_page=str(per_page))
            headers["X-Next-Page"] = str(page + 1)
            headers["Link"] = f'<{following}>; rel="next"'
        return web.json_response(files[(page - 1) * per_page : page * per_page], headers=headers)

    async def _notes(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        notes = self.comments.get((repo, int(request.match_info["iid"])), [])
        return web.json_response(self._page(request, notes, 20))

    async def _create_note(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        body = (await request.json())["body"]
        note = self._comment(repo, int(request.match_info["iid"]), body)
        return web.json_response(note, status=201)

    async def _edit_note(self, request: web.Request) -> web.StreamResponse:
        repo, refused = await self._gated(request)
        if refused is not None:
            return refused
        for note in self.comments.get((repo, int(request.match_info["iid"])), []):
            if note["id"] == int(request.match_info["id"]):
                note["body"] = (await request.json())["body"]
                return web.json_response(note)
        return web.json_response({"message": "404 Not found"}, status=404)
