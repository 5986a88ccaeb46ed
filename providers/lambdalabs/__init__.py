"""Lambda Cloud: instance types rented by API; the launch names an account key checked to be ours."""

from providers.interface import KEY_NAMED_AT_LAUNCH, Adapter, Renting
from providers.lambdalabs import api, keys, renting

ADAPTER = Adapter(
    name="lambda",
    api=api.API,
    bases={"lambda": "https://cloud.lambda.ai"},
    renting=Renting.of(
        renting,
        box_key=KEY_NAMED_AT_LAUNCH,
        key_problem=keys.lambda_key_problem,
        volumes="a filesystem",
        volume_call=renting.volume_call,
        read_volume=renting.read_volume,
        volume_ref="name",
        volume_root="/lambda/nfs/{name}",
        name_max=renting.NAME_MAX,
    ),
    rent_rank=1,
)
