from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from chat.selectors import conversation_groups_for
        from chat.tasks import evidence_calibration_schedule
        from knowledge.models import Document
        from knowledge.signals import knowledge_changed
        from pages import sidebar_reader_register

        # Every page's sidebar lists the reader's conversations (pages/ imports neither app).
        sidebar_reader_register(lambda user, limit: conversation_groups_for(user, limit=limit))

        # The evidence check's calibration follows the knowledge base (chat/calibration.py).
        knowledge_changed.connect(evidence_calibration_schedule, dispatch_uid="chat-calibrate")
        post_delete.connect(
            evidence_calibration_schedule, sender=Document, dispatch_uid="chat-calibrate-delete"
        )
