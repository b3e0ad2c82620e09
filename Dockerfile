# The project's image: Airflow 3.3 + the pinned runtime requirements + this project
# (domain package, Airflow plugin, DAGs). The same image runs every Airflow component
# and the Spark master/worker, so the Spark driver (inside an Airflow task) and the
# executors run one Spark version and can import the planner package.
FROM apache/airflow:3.3.2-python3.11

USER root
# A JRE for Spark (driver inside Airflow tasks, master and worker services); kcat to
# look at the cluster by hand from inside the stack.
RUN apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps kcat curl \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/default-java

# Every directory the stack's containers write as the airflow user (uid 50000, gid 0; or
# the operator's AIRFLOW_UID with gid 0), created here with that owner and group-writable.
# A named volume mounted on a path starts as a copy of the image's directory; a path the
# image lacks would be created root 755 and every write to it would fail. The compose test
# checks that each volume target and written path of docker-compose.yaml is in this list.
ENV KAFKA_REASSIGN_WRITABLE_DIRS="/opt/airflow /opt/airflow/logs /opt/airflow/auth /opt/airflow/kafka_reassign /opt/spark-work"
RUN mkdir -p $KAFKA_REASSIGN_WRITABLE_DIRS \
 && chown 50000:0 $KAFKA_REASSIGN_WRITABLE_DIRS \
 && chmod 2775 $KAFKA_REASSIGN_WRITABLE_DIRS

USER airflow
# Requirements first: this layer only changes when the pins change. apache-airflow is
# pinned in requirements.txt so pip cannot move the image's Airflow.
COPY --chown=airflow:root requirements.txt /opt/kafka-reassign/requirements.txt
# The Spark provider pulls in pyspark-client, whose Python files overwrite pyspark's own;
# put back the ones that match pyspark's JVM jars (else Python UDFs fail to construct).
# The Makefile does the same for the local .venv.
RUN pip install --no-cache-dir -r /opt/kafka-reassign/requirements.txt \
 && pip install --no-cache-dir --no-deps --force-reinstall \
      "$(grep -E '^pyspark==' /opt/kafka-reassign/requirements.txt)"

COPY --chown=airflow:root pyproject.toml README.md /opt/kafka-reassign/
COPY --chown=airflow:root include /opt/kafka-reassign/include
COPY --chown=airflow:root plugins /opt/kafka-reassign/plugins
RUN pip install --no-cache-dir --no-deps /opt/kafka-reassign
# The planner's Spark driver class-data archive, written once here for the image's JDK and PySpark.
ENV KAFKA_REASSIGN_SPARK_CLASS_ARCHIVE=/opt/kafka-reassign/class-archive
RUN python -m kafka_reassign.planning.spark.class_archive

COPY --chown=airflow:root docker /opt/kafka-reassign/docker
COPY --chown=airflow:root dags /opt/airflow/dags
