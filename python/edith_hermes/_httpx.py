"""The bridge that lets the Rust core send through an ``httpx.AsyncClient`` the application
owns (``AsyncEdithHermes.remote(..., http_client=client)``): the core builds each request
(key, idempotency, query) and reads the reply (problems, event streams, retries); this module
only hands it to httpx on the client's own event loop. The client is never closed here."""

from __future__ import annotations

from typing import Any


class TransportFailure(Exception):
    """A request that got no answer; ``kind`` is ``connect``, ``timeout`` or ``request``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Response:
    """A reply whose body is read chunk by chunk (an event stream lasts as long as its log)."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()
        self.status: int = response.status_code
        self.content_type: str | None = response.headers.get("content-type")

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body; ``None`` at its end (the response is closed then)."""
        import httpx

        try:
            return bytes(await self._chunks.__anext__())
        except StopAsyncIteration:
            await self._response.aclose()
            return None
        except httpx.TimeoutException as e:
            await self._response.aclose()
            raise TransportFailure("timeout", f"reading the reply timed out: {e!r}") from None
        except httpx.HTTPError as e:
            await self._response.aclose()
            raise TransportFailure("request", f"reading the reply failed: {e!r}") from None

    async def close(self) -> None:
        await self._response.aclose()


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

    extensions = {} if timeout is None else {"timeout": httpx.Timeout(timeout).as_dict()}
    request = client.build_request(method, url, headers=headers, content=body, extensions=extensions)
    try:
        response = await client.send(request, stream=True)
    except httpx.ConnectError as e:
        raise TransportFailure("connect", f"cannot connect to {url}: {e!r}") from None
    except httpx.TimeoutException as e:
        raise TransportFailure("timeout", f"{method} {url} timed out: {e!r}") from None
    except httpx.HTTPError as e:
        raise TransportFailure("request", f"{method} {url} failed: {e!r}") from None
    return Response(response)
