"""The import path that run configs record for the task data source.

Every task yaml names ``lengen.data.datamodule.TaskData`` as its ``_target_``, and so does every
run's config.yaml, its run id (the sweep directory's name) and the aggregation's groups
(``lengen.identity``): this path stays so that old run directories rebuild and re-evaluate, and
a re-run sweep finds the runs it already has. The source itself lives in
``lengen.data.task_data``, named for what it holds.
"""

from lengen.data.task_data import TaskData

__all__ = ["TaskData"]
