"""dependency-injector's FastAPI example application (users, a repository, a service), with an assistant added."""
