"""Paperspace: machines registered by hand, stopped, released and listed by API; no renting here."""

from providers.interface import Adapter
from providers.paperspace import api

ADAPTER = Adapter(name="paperspace", api=api.API, bases={"paperspace": "https://api.paperspace.com"})
