"""The test processes' password hasher: Django's PBKDF2-SHA256 with fewer rounds.

Every password a test makes or checks (a persona, a login, a throttled guess, which Django hashes even
for a name that does not exist) cost ~0.4 s of CPU at Django's 1,000,000 rounds: 50 s of the suite's
test processes. The algorithm and its encoding are Django's, the rounds are written in each hash, so a
hash made here verifies in a stack or worker process (which keeps the deployment's hashers) and one made
there verifies here.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FewerRounds(PBKDF2PasswordHasher):
    iterations = 1_000
