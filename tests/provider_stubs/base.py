"""What every provider's stand-in shares: the box states, a refusal in the provider's words, and the
interface the one stub server (tests/provider_stub.py) calls. Each provider's stand-in is its own module
here, written from its documentation, not from our adapter (providers/<name>/)."""

from providers import schema

RUNNING, STOPPED, GONE, BOOTING = "running", "stopped", "gone", "booting"


class Refused(Exception):
    def __init__(self, code: int, payload: dict):
        super().__init__(code)
        self.code, self.payload = code, payload


def no_body(body):
    if body is not None:
        raise Refused(400, {"error": "this endpoint takes no body"})


class StubProvider:
    """One provider's API: its routes (method, path pattern, verb), how it lists boxes, how it acts on
    one; where it rents, how it reads a create and answers it. The defaults answer "not documented"."""

    name = auth = ""
    routes: list[tuple[str, str, str]] = []
    schemas = None  # the provider's published shapes (providers/<name>/schema.py), where they are written down
    answer_of: dict[str, str] = {}  # a stand-in verb → its answer's schema (ANSWERS' keys); errors: "error"
    no_content: tuple[str, ...] = ()  # verbs the document answers with no body (204)

    def answer_problems(self, verb: str, code: int, payload) -> list[str]:
        """How an answer of this stand-in departs from the provider's published response schema."""
        if verb in self.no_content and code < 400:
            return [] if payload is None and code == 204 else [f"{verb} answers 204 with no body, not {code}"]
        if self.schemas is None or payload is None:
            return []
        key = "error" if code >= 400 else self.answer_of.get(verb)
        wanted = self.schemas.ANSWERS.get(key) if key else None
        return schema.problems(wanted, payload) if wanted else []

    def listing(self, boxes, endpoints=None, ends=None, names=None):
        raise NotImplementedError

    def page(self, stub, listing, query):
        """The page of a listing the query asks for; a provider that does not page takes no query."""
        no_body(query)
        return listing

    def act(self, stub, verb, target, body):
        raise NotImplementedError

    def volumes_answer(self, items: list) -> object:
        return {"data": items}

    def offers_answer(self, offers, body):
        raise Refused(404, {"error": f"{self.name} has no offer search"})

    def graphql(self, stub, body):
        raise Refused(404, {"error": f"{self.name} has no GraphQL"})

    def attach(self, stub, target, body):
        raise Refused(404, {"error": f"{self.name} attaches no key to a box"})

    def create_volume(self, body, number: int) -> tuple[dict, object]:
        """(the item it lists from now on, the create's answer); Refused where it documents none."""
        raise Refused(404, {"error": f"{self.name} creates no volume here"})

    def check_create(self, target, body) -> str:
        raise Refused(404, {"error": f"{self.name} creates nothing here"})

    def has_capacity(self, stub, target) -> bool:
        return True

    def refuse_no_capacity(self, target):
        raise Refused(503, {"error": "no capacity"})

    def keys_given(self, stub, body) -> list[str]:
        return []  # the key is attached after the create (vast.ai), or none

    def new_id(self, count: int) -> str:
        raise NotImplementedError

    def created(self, box: str, name: str):
        raise NotImplementedError
