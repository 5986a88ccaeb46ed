"""Paperspace's API as its documentation says (../shared/reference/profiles/paperspace.md), a stand-in for tests:
its lists are v1's ({hasMore, nextPage, items}, ?after=nextPage; Paperspace/cli api/openapi.ts)."""

from tests.provider_stubs.base import GONE, RUNNING, STOPPED, Refused, StubProvider, no_body


class Paperspace(StubProvider):
    """api.paperspace.com/v1, Bearer: PATCH /machines/{id}/stop, DELETE /machines/{id}, GET /machines/{id}."""

    name, auth = "paperspace", "bearer"
    routes = [
        ("GET", r"/v1/machines", "list"),
        ("GET", r"/v1/public-ips", "ips"),
        ("GET", r"/v1/snapshots", "snapshots"),
        ("PATCH", r"/v1/machines/(?P<id>[\w.-]+)/stop", "stop"),
        ("DELETE", r"/v1/machines/(?P<id>[\w.-]+)", "destroy"),
        ("GET", r"/v1/machines/(?P<id>[\w.-]+)", "status"),
    ]

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        """Each machine; its auto-shutdown fields (ends[id], a dict) and public IP where the test set them."""
        endpoints, ends = endpoints or {}, ends or {}
        return {
            "items": [
                {
                    "id": i,
                    "state": "ready" if state == RUNNING else "off",
                    **({"publicIp": endpoints[i][0]} if i in endpoints else {}),
                    **(ends[i] if isinstance(ends.get(i), dict) else {}),
                }
                for i, state in boxes.items()
            ]
        }

    page_size = 20  # the stand-in's own page size: the spec says only that a list is paged

    def page(self, stub, listing, query):
        """One page of machines after the cursor (a machine's id), with hasMore and nextPage as v1 writes them."""
        query = query or {}
        if set(query) - {"after", "limit"}:
            raise Refused(400, {"message": f"unknown query parameters: {sorted(set(query) - {'after', 'limit'})}"})
        items = sorted(listing["items"], key=lambda item: item["id"])
        if "after" in query:
            items = [item for item in items if item["id"] > str(query["after"])]
        shown, more = items[: self.page_size], len(items) > self.page_size
        return {"items": shown, "hasMore": more, **({"nextPage": shown[-1]["id"]} if more else {})}

    def act(self, stub, verb, target, body):
        no_body(body)
        if stub.state_of(target) == GONE:
            raise Refused(404, {"message": "Not found"})
        if verb == "status":
            return 200, {"id": target, "state": "ready" if stub.state_of(target) == RUNNING else "off"}
        stub.change(self.name, verb, target, body, STOPPED if verb == "stop" else GONE)
        return 200, {"id": target, "state": "stopping" if verb == "stop" else "off"}
