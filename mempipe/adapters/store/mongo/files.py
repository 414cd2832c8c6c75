"""The MongoDB store's file log: where mempipe wrote users' text outside the store."""

from __future__ import annotations

from mempipe.adapters.store.mongo.base import MongoParts
from mempipe.schemas.run import WrittenFile


class MongoFileLog(MongoParts):
    def record_file(self, file: WrittenFile) -> None:
        document = file.model_dump(mode="json", exclude={"path"})
        with self._errors("written_files"):
            self.db["written_files"].update_one({"_id": file.path}, {"$set": document}, upsert=True)

    def written_files(self) -> list[WrittenFile]:
        return [
            WrittenFile(path=d.pop("_id"), **d)
            for d in self.db["written_files"].find().sort("_id", 1)
        ]

    def store_id(self) -> str:
        with self._errors("store_identity"):
            found = self.db["store_identity"].find_one({"_id": "store"})
        return str(found["id"]) if found else ""
