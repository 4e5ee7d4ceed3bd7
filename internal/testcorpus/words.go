package testcorpus

import "strings"

// Word lists of the generated text. Ham and spam share the common words
// and differ in the rest, as real mail does.

var firstNames = strings.Fields(`Anna Ben Carla David Elena Frank Greta Hugo Ines Jonas Karin Lars Maria
Nils Olga Paul Rosa Stefan Tina Uwe Vera Walter Yusuf Zoe Amir Björn Chloé Dmitri Émile François Jürgen
Łukasz Marta Noémie Øystein Pilar Renée Søren Tomás Zoë Ahmed Mei Kenji Priya Sven`)

var lastNames = strings.Fields(`Adler Becker Costa Dietrich Eriksen Fischer Garcia Hansen Ivanov Jansen
Keller Lindqvist Moreau Nakamura Olsen Petrov Quinn Rossi Schmidt Tanaka Urban Vogel Weber Young Zimmer
Müller Šimek Ødegaard Björk García Nowak Kowalski Dubois Lefèvre Novák`)

var hamDomains = []string{"example.org", "example.com", "example.net", "mail.example.org",
	"lists.example.net", "uni.example", "company.test", "family.example"}

var spamDomains = []string{"deals.invalid", "promo-mail.test", "win-now.invalid", "cheap-meds.test",
	"secure-verify.invalid", "bulk.example", "offers.test", "crypto-gain.invalid"}

var commonWords = strings.Fields(`the a of to and in is it you that for on with as be this have are at
not but we by from or your will can all an they was if one our so there what more about which when
just get also would like time out up new make now only some other very could how than first well`)

var hamWords = append(strings.Fields(`meeting agenda project review draft attached notes tomorrow
thursday afternoon minutes schedule report figures budget quarter release branch commit build test
server config deploy bug fix patch kernel driver module compile error log trace debug version upgrade
family dinner weekend kids garden holiday train tickets photos birthday party recipe bread soup
library book chapter thesis seminar lecture paper reviewer comments deadline conference slides
thanks regards cheers best please let know think maybe perhaps agree suggest question answer
colleague team manager office room calendar invite call phone discuss plan idea proposal
postgres sqlite query index table migration backup restore disk memory cpu network router firewall`),
	commonWords...)

var spamWords = append(strings.Fields(`free offer money cash win winner prize click here now limited
guaranteed discount cheap viagra pills pharmacy prescription loan credit mortgage rate approved
investment bitcoin crypto profit returns income earn dollars million urgent act fast exclusive
deal save lowest price order online bonus casino jackpot lottery claim reward gift card verify
account suspended password security alert unusual activity confirm identity bank transfer
beneficiary inheritance barrister dear friend congratulations selected special promotion
unsubscribe remove opt-out weight loss miracle supplement enlargement satisfaction risk-free
refinance debt consolidation wealthy secret opportunity home-based business millionaire`),
	commonWords...)

// Text in other languages, for the charset messages.
var germanText = []string{
	"Grüße aus München! Das Treffen ist am Dienstag um 14 Uhr im großen Saal.",
	"Die Änderungen am Entwurf sind übernommen; bitte prüfe noch die Übersicht.",
	"Schöne Feiertage und einen guten Rutsch ins neue Jahr, liebe Grüße, Jürgen.",
	"Könntest du mir die Unterlagen für die Sitzung bis Freitag schicken?",
}

var frenchText = []string{
	"Bonjour à tous, la réunion est reportée à jeudi prochain, même heure.",
	"Voici le compte rendu de la séance; n'hésitez pas à me faire part de vos remarques.",
	"Merci pour votre réponse rapide. Bien cordialement, Émile Lefèvre.",
	"Le dîner de Noël aura lieu chez Hélène, apportez un dessert s'il vous plaît.",
}

var russianText = []string{
	"Привет! Встреча переносится на пятницу, в то же время.",
	"Отчёт за квартал во вложении, посмотри, пожалуйста, таблицу с цифрами.",
	"Спасибо за помощь с сервером, всё работает отлично.",
}

var russianSpam = []string{
	"Только сегодня! Скидка 90% на все товары, звоните прямо сейчас.",
	"Заработок в интернете от 5000 рублей в день без вложений.",
	"Вы выиграли приз! Для получения перейдите по ссылке.",
}

var japaneseText = []string{
	"来週の会議の資料を添付します。ご確認ください。",
	"お疲れ様です。明日の打ち合わせは十時からでお願いします。",
}

var chineseSpam = []string{
	"特价优惠，全场商品一律五折，欢迎订购！",
	"发票代开，正规税务发票，联系电话请回复邮件。",
	"网上赚钱新方法，每天轻松赚取一千元。",
}

var patchFiles = strings.Fields(`arch/mips/kernel/setup.c arch/mips/mm/tlb-r4k.c arch/mips/kernel/traps.c
drivers/net/sgiseeq.c arch/mips/sgi/kernel/indy_int.c include/asm-mips/pgtable.h arch/mips/boot/elf2ecoff.c
drivers/scsi/wd33c93.c arch/mips/lib/memcpy.S arch/mips/kernel/irq.c fs/binfmt_elf.c arch/mips/Makefile`)

var listWords = append(strings.Fields(`linux mips kernel patch port indy indigo r4000 r4400 r5000 cache
tlb exception interrupt handler boot loader ecoff elf binutils gcc egcs glibc toolchain cross compile
build tree cvs snapshot oops panic crash register stack trace address page table mapping
endian little big byte serial console framebuffer scsi ethernet driver probe firmware prom arcs
userland init shell libc ld.so symbol relocation assembler instruction delay slot pipeline
ralf thanks works fine for me broken here tested applied merged upstream`), commonWords...)
