"""One pull into a place at a time (custody copies, the control host's checkpoints): a second puller
is told at once that another holds the place, and the place is free again once the first lets go."""

from node.pull import only_puller


def test_a_second_puller_is_told_another_holds_the_place(tmp_path):
    lock = tmp_path / "run" / ".lock"
    # The second opens the lock file again: the kernel's flock refuses that open file.
    with only_puller(lock) as first, only_puller(lock) as second:
        assert (first, second) == (True, False)
    with only_puller(lock) as again:
        assert again is True
