"""After the build: the release plan (QA, then publishing), the image's tags, its SBOM and the
push that promotes one digest to every tag."""
