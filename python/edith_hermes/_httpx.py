"""The bridge that lets the Rust core send through an ``httpx.AsyncClient`` the application
owns (``AsyncEdithHermes.remote(..., http_client=client)``): the core builds each request
(key, idempotency, query) and reads the reply (problems, event streams, retries); this module
only hands it to httpx on the client's own event loop. The client is never closed here."""

from __future__ import annotations

import asyncio
from typing import Any


class TransportFailure(Exception):
    """A request that got no answer; ``kind`` is ``connect``, ``timeout``, ``request`` (all
    three worth a retry) or ``hook`` (the caller's client's own hook stopped it)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Response:
    """A reply whose body is read chunk by chunk (an event stream lasts as long as its log)."""

    def __init__(self, response: Any, body: bytes | None = None) -> None:
        self._response = response
        # `body`: a reply already read (and closed) by the caller's hooks.
        self._chunks = _once(body) if body is not None else response.aiter_bytes()
        self.status: int = response.status_code
        self.content_type: str | None = response.headers.get("content-type")
        # Where a started stream is read (`201`), or a retry is sent on to (`303`; httpx follows
        # no redirect unless its client was told to).
        self.location: str | None = response.headers.get("location")

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body; ``None`` at its end (the response is closed then)."""
        import httpx

        try:
            return bytes(await self._chunks.__anext__())
        except StopAsyncIteration:
            await self._response.aclose()
            return None
        except httpx.TimeoutException:
            await self._response.aclose()
            raise TransportFailure("timeout", "reading the reply timed out") from None
        except (httpx.HTTPError, httpx.StreamError) as e:
            await self._response.aclose()
            raise TransportFailure("request", f"reading the reply failed ({type(e).__name__})") from None

    async def close(self) -> None:
        await self._response.aclose()


# When the core names no timeout (event streams; plain calls), these apply instead of the
# client's own (httpx's default is 5 s between two reads, shorter than the control plane's 15 s
# keep-alive on a quiet stream; 90 s outlasts the control plane's own 60 s limits, so its
# problem arrives first); the core bounds each step itself too.
_UNNAMED = {"connect": 10.0, "read": 90.0, "write": 60.0, "pool": 60.0}


async def send(
    client: Any,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes | None,
    timeout: float | None,
) -> Response:
    """Sends one request through ``client``; the reply once its status is known."""
    import httpx

    limits = _UNNAMED if timeout is None else httpx.Timeout(timeout).as_dict()
    request = client.build_request(
        method, url, headers=headers, content=body, extensions={"timeout": limits}
    )
    try:
        response = await client.send(request, stream=True)
    except httpx.HTTPStatusError as e:
        # A caller's response hook raised for the status. If it read the reply, the core reads
        # the problem from it; if not, httpx has closed it unread and the reply is lost.
        try:
            body = e.response.content
        except httpx.ResponseNotRead:
            raise TransportFailure(
                "hook",
                f"{method} {url}: a response hook of the http_client raised for HTTP "
                f"{e.response.status_code} before the reply was read (raise_for_status in a "
                "hook hides the control plane's problem details; remove it)",
            ) from None
        return Response(e.response, body)
    except httpx.ConnectError as e:
        raise TransportFailure("connect", f"cannot connect to {url}: {e}") from None
    except httpx.TimeoutException:
        raise TransportFailure("timeout", f"{method} {url} timed out") from None
    except httpx.HTTPError as e:
        # Only the kind: some errors quote the request's headers, the key among them.
        raise TransportFailure("request", f"{method} {url} failed ({type(e).__name__})") from None
    return Response(response)


async def _once(body: bytes) -> Any:
    yield body


class Step:
    """One step the core runs on the client's loop (``send``, ``next_chunk``). When the core
    stops waiting for it (its caller was cancelled, or the step hung), it calls ``abandon`` on
    the loop: a step still running is cancelled, and a reply that arrived after all is closed,
    so no connection stays checked out of the caller's pool."""

    def __init__(self, coroutine: Any) -> None:
        self._coroutine = coroutine
        self._task: asyncio.Task[Any] | None = None
        self._late: Any = None
        self._abandoned = False

    async def run(self) -> Any:
        if self._abandoned:
            self._coroutine.close()
            raise asyncio.CancelledError
        self._task = asyncio.current_task()
        result = await self._coroutine
        if self._abandoned:
            await _close(result)
            raise asyncio.CancelledError
        # Until the core has it: abandoned from now on, it is closed by `abandon`.
        self._late = result
        return result

    def abandon(self) -> None:
        self._abandoned = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
        elif self._late is not None:
            asyncio.ensure_future(_close(self._late))


async def _close(result: Any) -> None:
    if isinstance(result, Response):
        await result.close()
