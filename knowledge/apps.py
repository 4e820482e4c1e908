from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge base"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from knowledge.models import Document
        from knowledge.signals import document_deleting

        # However a document is deleted (admin, purge, cascade), the stored vectors of its
        # sentences that no other chunk holds go once the deletion commits.
        pre_delete.connect(document_deleting, sender=Document, dispatch_uid="knowledge-prune")
