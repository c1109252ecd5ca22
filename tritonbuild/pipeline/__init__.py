"""The build pipeline: flags -> plan -> Dockerfile and image files -> build directory -> engine."""
