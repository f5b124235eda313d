"""GitLab CI runners (policy: ``runners``): their settings, their resolution into ``Runner``s and their CI pools."""
