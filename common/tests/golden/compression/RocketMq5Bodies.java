// Writes the bodies a RocketMQ 5 producer stores with compressType LZ4 and ZSTD: the same library
// calls as org.apache.rocketmq.common.compression.Lz4Compressor and ZstdCompressor (lz4-java's
// LZ4FrameOutputStream; zstd-jni's ZstdOutputStream at compressLevel 5, flushed then closed).
// Regenerate (Debian's liblz4-java and libzstd-jni-java, the versions RocketMQ 5 pins):
//   javac -cp /usr/share/java/lz4-java.jar:/usr/share/java/zstd-jni.jar RocketMq5Bodies.java
//   java -cp .:/usr/share/java/lz4-java.jar:/usr/share/java/zstd-jni.jar RocketMq5Bodies .
import com.github.luben.zstd.ZstdOutputStream;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import net.jpountz.lz4.LZ4FrameOutputStream;

public class RocketMq5Bodies {
    /** The body: 150 numbered lines, 4,840 bytes (over compressMsgBodyOverHowmuch, 4 KiB). */
    static byte[] body() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 150; i++) {
            sb.append("line ").append(i).append(": orderly and compressed\n");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        byte[] src = body();
        ByteArrayOutputStream lz4 = new ByteArrayOutputStream(src.length);
        LZ4FrameOutputStream lz4Out = new LZ4FrameOutputStream(lz4);
        lz4Out.write(src);
        lz4Out.flush();
        lz4Out.close();
        Files.write(Paths.get(args[0], "lz4_body.bin"), lz4.toByteArray());

        ByteArrayOutputStream zstd = new ByteArrayOutputStream(src.length);
        ZstdOutputStream zstdOut = new ZstdOutputStream(zstd, 5);
        zstdOut.write(src);
        zstdOut.flush();
        zstdOut.close();
        Files.write(Paths.get(args[0], "zstd_body.bin"), zstd.toByteArray());
        System.out.println("body " + src.length + " bytes; lz4 " + lz4.size() + "; zstd " + zstd.size());
    }
}
