"""TensorFlow Serving's start-up wait: the ports open once the first config's models have loaded.

``tensorflow_model_server`` blocks in ``ServerCore::Create`` until every model of the initial
config has its wanted versions AVAILABLE, and gives up (exit 255, "N servable(s) did not become
available") when one of them ends in an error after its retries. A model whose base path is empty
or missing is waited for indefinitely, as there.

Per model: with ``specific`` versions, each listed version must reach AVAILABLE or END (END is a
failure); otherwise one AVAILABLE version is enough, and the model has failed once every version
it has shown has ended (a newer broken directory reported while an older one still loads does
not end the wait early).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runtime.errors import UnknownError
from serving.config import ModelConfig, SpecificVersions
from serving.servable import ManagerState, ServableState

AVAILABLE, END = ManagerState.AVAILABLE, ManagerState.END


@dataclass(frozen=True)
class InitialLoad:
    finished: bool
    failed: tuple[ServableState, ...] = ()

    def error(self) -> UnknownError:
        """TensorFlow Serving's start-up error for the failed versions."""
        parts = "".join(
            f"{{{s.id}"
            + (f" due to error: {s.error.status_text()}" if s.error is not None else "")
            + "}, "
            for s in self.failed
        )
        return UnknownError(f"{len(self.failed)} servable(s) did not become available: {{{parts}}}")


def initial_load(
    configs: Iterable[ModelConfig], states: Callable[[str], list[ServableState]]
) -> InitialLoad:
    """Where the initial load stands, from each model's version states (newest first)."""
    finished = True
    failed: list[ServableState] = []
    for config in configs:
        seen = states(config.name)
        if isinstance(config.version_policy, SpecificVersions):
            by_version = {s.id.version: s for s in seen}
            for version in config.version_policy.versions:
                state = by_version.get(version)
                if state is None or state.state not in (AVAILABLE, END):
                    finished = False
                elif state.state is END:
                    failed.append(state)
            continue
        if any(s.state is AVAILABLE for s in seen):
            continue
        if seen and all(s.state is END for s in seen):
            failed.append(seen[0])
            continue
        finished = False
    return InitialLoad(finished, tuple(failed))
