"""A dataset's license as the Hub's card metadata takes it: one SPDX license id (checked
against the SPDX list of ``license-expression``), or ``other``."""

from __future__ import annotations

from synthfactory.errors import SynthfactoryError

OTHER = "other"


def hub_license(text: str) -> str:
    """``Apache-2.0`` -> ``apache-2.0`` (the Hub's spelling: SPDX ids lower-cased);
    anything but one known SPDX id or ``other`` is one line naming it."""
    if text.strip().lower() == OTHER:
        return OTHER
    from license_expression import LicenseSymbol, get_spdx_licensing

    licensing = get_spdx_licensing()
    checked = licensing.validate(text, strict=True)
    if checked.errors or not isinstance(licensing.parse(text), LicenseSymbol):
        raise SynthfactoryError(
            f"--license {text!r}: not an SPDX license id (e.g. apache-2.0, mit, cc-by-4.0, "
            "odc-by-1.0) or 'other'" + (f" ({checked.errors[0]})" if checked.errors else
                                        ": one id, not an expression"))
    return str(checked.normalized_expression).lower()
