"""The real `daytona` Python SDK (pinned in requirements.txt) against a real
ptd (see daytona_test.go, TestPythonSDK), told only DAYTONA_API_URL and
DAYTONA_API_KEY: create, execute, files, stop/start, delete, not-found."""

import unittest

from daytona import CreateSandboxFromSnapshotParams, Daytona, DaytonaNotFoundError


class PythonSDK(unittest.TestCase):
    def test_main_cases(self):
        daytona = Daytona()  # DAYTONA_API_URL and DAYTONA_API_KEY from the environment
        sb = daytona.create(CreateSandboxFromSnapshotParams(
            snapshot="busybox", labels={"sdk": "python"}, env_vars={"PYV": "ok"}, auto_stop_interval=0))
        try:
            self.assertEqual(sb.state, "started")
            self.assertEqual(sb.labels["sdk"], "python")

            r = sb.process.exec("echo $PYV; exit 4")
            self.assertEqual(r.exit_code, 4)
            self.assertEqual(r.result.strip(), "ok")
            r = sb.process.exec("pwd", cwd="/tmp")
            self.assertEqual(r.result.strip(), "/tmp")

            sb.fs.upload_file(b"from python\n", "/root/py/a.txt")
            self.assertEqual(sb.fs.download_file("/root/py/a.txt"), b"from python\n")
            self.assertEqual([f.name for f in sb.fs.list_files("/root/py")], ["a.txt"])

            sb.stop()
            self.assertEqual(sb.state, "stopped")
            sb.start()
            self.assertEqual(sb.state, "started")
            self.assertEqual(sb.fs.download_file("/root/py/a.txt"), b"from python\n")
            self.assertEqual(daytona.get(sb.id).state, "started")
        finally:
            sb.delete()
        with self.assertRaises(DaytonaNotFoundError):
            daytona.get(sb.id)
        with self.assertRaises(DaytonaNotFoundError):
            daytona.get("no-such-sandbox")


if __name__ == "__main__":
    unittest.main()
