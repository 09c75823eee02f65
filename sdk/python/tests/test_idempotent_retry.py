"""The client's own retry of a create whose answer was lost, against a real
ptd behind a proxy that drops the first answer: the retry carries the same
Idempotency-Key, so ptd replays the first create instead of making a
second sandbox."""

from __future__ import annotations

from typing import Callable

import httpx

from platinum import Platinum

from conftest import LocalServer, QuietHandler, tag


class DropFirstAnswer(LocalServer):
    """Forwards every request to ptd; the first POST /v1/sandboxes is
    forwarded (ptd creates the sandbox) but its answer is never sent: the
    connection is closed instead, as when a network drops mid-call."""

    def __init__(self, upstream: str) -> None:
        self.seen: list[tuple[str, str, str | None, int, str | None]] = []
        proxy = self

        class H(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                r = httpx.request(self.command, upstream + self.path, headers=hdrs, content=body, timeout=300)
                creates = [s for s in proxy.seen if s[0] == "POST" and s[1].startswith("/v1/sandboxes")]
                key = self.headers.get("Idempotency-Key")
                proxy.seen.append((self.command, self.path, key, r.status_code, r.headers.get("Idempotent-Replayed")))
                if self.command == "POST" and self.path.startswith("/v1/sandboxes") and not creates:
                    self.close_connection = True
                    self.connection.close()
                    return
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_DELETE = do_PATCH = _forward

        super().__init__(H)


def test_lost_create_answer_is_retried_with_the_same_key(client: Platinum, track: Callable[[str], None]) -> None:
    proxy = DropFirstAnswer(client.api_url)
    t = tag()
    try:
        with Platinum(api_url=proxy.url) as c:
            sbx = c.sandboxes.create(template="busybox", metadata={"suite": t})
        track(sbx.id)
    finally:
        proxy.close()
    posts = [s for s in proxy.seen if s[0] == "POST"]
    assert len(posts) == 2, posts
    (_, _, k1, st1, _), (_, _, k2, st2, replayed) = posts
    assert k1 and k1 == k2, "the retry must reuse the first attempt's key"
    assert (st1, st2, replayed) == (201, 201, "true")
    assert [r.id for r in client.sandboxes.list(metadata={"suite": t})["rows"]] == [sbx.id]
