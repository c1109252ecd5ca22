"""The image under test, as qa/L0_image finds it ($TVB_IMAGE, else $TVB_IMAGE_TAG)."""
from qa.L0_image.conftest import image  # noqa: F401  (the fixture, shared)
