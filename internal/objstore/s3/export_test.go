package s3

import "github.com/minio/minio-go/v7"

// MinioClient exposes the client to external tests that inspect the server.
func MinioClient(s *Store) *minio.Client { return s.client }
