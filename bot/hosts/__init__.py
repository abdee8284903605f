"""ADRs linked from GitHub and GitLab, and the verdict posted back on the pull request.

`links` recognises and checks a link; `clients` makes the REST calls (GitHub's v3 API on
github.com or GitHub Enterprise, `DEBATEBOT_GITHUB_URL`; GitLab's v4 API on gitlab.com or
self-hosted, `DEBATEBOT_GITLAB_URL`), on `bot.outbound`'s guarded client; `answers` validates
what they return; `fetch` reads a linked ADR; `comments` keeps the one verdict comment.
Failures are answered in the thread in words: a private repository the token cannot see, a
rate limit (waited out when it resets within a minute, else "try after …"), a file too large, a
redirect, an answer too large or cut short, a host too slow.
"""
