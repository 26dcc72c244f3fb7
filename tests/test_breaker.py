from guard.core.breaker import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_opens_after_threshold_then_lets_one_trial_through():
    clock = Clock()
    b = CircuitBreaker(3, 10.0, clock)
    for _ in range(2):
        assert b.allow()
        b.failure()
    assert b.state == "closed"
    b.failure()
    assert b.state == "open" and not b.allow()
    clock.now = 10.0
    assert b.state == "half_open"
    assert b.allow()  # the trial
    assert not b.allow()  # only one at a time
    b.failure()  # the trial failed: open again for a full cooldown
    assert b.state == "open"
    clock.now = 20.0
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow()


def test_a_success_resets_the_count():
    b = CircuitBreaker(2, 1.0, Clock())
    b.failure()
    b.success()
    b.failure()
    assert b.state == "closed"
