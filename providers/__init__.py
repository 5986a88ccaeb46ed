"""The providers' adapters: one folder each (`providers/<name>/`), each an `Adapter` (providers/interface.py)
named ADAPTER in its `__init__`. Adding a provider is one folder: it is found here, by walking this package.

Also here, whatever the provider: how answers read (reading.py), what a rent needs and which offer fits
(offers.py), and the one HTTP exchange with bounded answers and retries (http.py).
"""

import importlib
import pkgutil

from providers.interface import Adapter, ProviderApi


def discover(path, package: str) -> dict[str, Adapter]:
    """{profile key: Adapter} of every folder under the package that holds one."""
    found = {}
    for module in pkgutil.iter_modules(path):
        if module.ispkg:
            adapter = importlib.import_module(f"{package}.{module.name}").ADAPTER
            found[adapter.name] = adapter
    return found


ADAPTERS: dict[str, Adapter] = discover(__path__, __name__)
APIS: dict[str, ProviderApi] = {name: adapter.api for name, adapter in ADAPTERS.items()}
# The platforms whose documented API searches offers and creates, in the order a rent asks them.
RENTABLE = tuple(name for name, a in sorted(ADAPTERS.items(), key=lambda item: item[1].rent_rank) if a.renting)


def renting_of(provider: str):
    """The provider's Renting; ValueError where it cannot be rented here."""
    adapter = ADAPTERS.get(provider)
    if adapter is None or adapter.renting is None:
        raise ValueError(f"{provider} cannot be rented here")
    return adapter.renting
