"""Engine images: metadata (images/<engine>/image.yaml), building with the Docker SDK, the lock file
(images/images.lock.json) and inspection. The docker runtime runs what is built here."""
