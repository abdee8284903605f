"""The parts of GitHub's and GitLab's API answers the bot reads, validated as they arrive."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter


class _Sha(BaseModel):
    sha: str


class GitHubContent(BaseModel):
    type: str = "file"
    encoding: str = ""
    content: str = ""
    size: int = 0


class GitHubPull(BaseModel):
    title: str | None = None
    body: str | None = None
    head: _Sha


class GitHubFile(BaseModel):
    filename: str
    status: str = ""


class GitLabFile(BaseModel):
    encoding: str = "base64"
    content: str = ""
    size: int = 0


class GitLabMergeRequest(BaseModel):
    title: str | None = None
    description: str | None = None
    sha: str


class GitLabChange(BaseModel):
    new_path: str
    deleted_file: bool = False


class GitLabChanges(BaseModel):
    changes: list[GitLabChange]


class Comment(BaseModel):
    """A GitHub issue comment or a GitLab note."""

    id: int
    body: str | None = None


PAGE = TypeAdapter(list[dict[str, Any]])


GITHUB_CONTENT = TypeAdapter(GitHubContent)


GITHUB_PULL = TypeAdapter(GitHubPull)


GITHUB_FILES = TypeAdapter(list[GitHubFile])


GITLAB_FILE = TypeAdapter(GitLabFile)


GITLAB_MERGE_REQUEST = TypeAdapter(GitLabMergeRequest)


GITLAB_CHANGES = TypeAdapter(GitLabChanges)


GITLAB_DIFFS = TypeAdapter(list[GitLabChange])


COMMENT = TypeAdapter(Comment)


COMMENTS = TypeAdapter(list[Comment])
