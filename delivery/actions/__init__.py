"""DELIVER state changes: one function per verb, each in a transaction with an audit entry.

Every move goes through `_move`, which allows only TEARDOWN_TRANSITIONS. Requesting, approving and
executing lock the instance row first: the evidence of every run on a box lives on that box or
in custody, so consequences touching the same evidence are decided one at a time, each counting
the others in flight as done (delivery.evidence). Execution is claimed exactly once, its idempotency
key travels to the provider, and a second consequence on a box waits while one executes.

One module per verb group: base (the shared rules), requests, proofs, decisions, execution, effects,
attention, holds."""
