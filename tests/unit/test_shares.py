"""Bronze's shares of a run's files (`transforms/bronze.balanced_shares`), worked by hand."""

from __future__ import annotations

from correlake.lake.landing import LandingFile
from correlake.transforms.bronze import balanced_shares


def files(*sizes: int) -> list[LandingFile]:
    return [LandingFile("messages", f"/l/messages/{n}.jsonl", size, 0, "/l") for n, size in enumerate(sizes)]


def test_the_largest_file_goes_first_each_to_the_smallest_share():
    # 16 bytes at 8 a share, 2 cores: 2 shares; 5 -> A, 4 -> B, 3 -> B (7), 3 -> A (8), 1 -> B (8)
    shares = balanced_shares(files(5, 4, 3, 3, 1), target=8, cores=2)
    assert [[f.size for f in share] for share in shares] == [[5, 3], [4, 3, 1]]


def test_at_least_a_share_per_core_and_never_more_shares_than_files():
    assert len(balanced_shares(files(1, 1, 1), target=100, cores=2)) == 2
    assert len(balanced_shares(files(50, 50, 50), target=10, cores=2)) == 3  # 15 by size, 3 files
